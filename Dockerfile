# The Kueuestream worker image used by docker-compose.yml.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY admission ./admission
COPY streams ./streams
COPY agents ./agents
# kueuestream/ links the three folders above as the sub-packages of the one import package.
COPY kueuestream ./kueuestream
RUN pip install --no-cache-dir . && useradd --system --home /var/lib/kueuestream kueuestream \
    && mkdir -p /var/lib/kueuestream && chown kueuestream /var/lib/kueuestream
USER kueuestream
WORKDIR /var/lib/kueuestream
ENTRYPOINT []
CMD ["kueuestream", "--help"]
