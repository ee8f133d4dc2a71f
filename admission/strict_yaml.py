"""YAML read the way the API server reads manifests, with libyaml's C parser when present.

PyYAML's safe loader takes a key written twice as last-wins, expands alias
bombs without limit, and crashes (C composer: stack overflow) or fails
(Python composer: RecursionError) on deeply nested documents. The API server
refuses all three, so this module does too, with an error that says where:

- a key given twice in one map (the API server's strict field validation);
- excessive aliasing, by go-yaml's rule (``allowedAliasRatio`` in
  go.yaml.in/yaml/v2 decode.go, which sigs.k8s.io/yaml uses): once a document
  has expanded to more than 1,000 values of which more than 100 came from
  aliases, the share from aliases may be at most 99% up to 400,000 values,
  falling linearly to 10% at 4,000,000;
- nesting deeper than :data:`MAX_DEPTH` levels;
- an object larger than :data:`MAX_OBJECT_BYTES`, the API server's request
  body limit (for a ``kind: List`` document, each item is one object).

Values are what Kubernetes makes of YAML: maps with string keys (a key that
is not a string, such as ``1:``, keeps the text it is written with), lists,
strings, booleans, null, 64-bit integers and floats. A timestamp stays the
text it is written with; an integer beyond 64 bits too (a quantity such as
``nominalQuota: 100000000000000000000`` still parses). Tags with no JSON
value (``!!binary``, ``!!set``, ``!!omap``, custom tags) are refused.

Speed: libyaml parses and composes in C; the values are built here in one
pass over the composed nodes that also makes every check, rather than through
PyYAML's generic constructor.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from kueuestream.admission.errors import join_path

MAX_DEPTH = 100
MAX_OBJECT_BYTES = 3 * 1024 * 1024  # k8s.io/apiserver: MaxRequestBodyBytes
# go-yaml's aliasing thresholds (see the module docstring).
ALIAS_MIN_VALUES = 1000
ALIAS_MIN_ALIASED = 100
ALIAS_RANGE_LOW = 400_000
ALIAS_RANGE_HIGH = 4_000_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# libyaml's composer recurses in C once per nesting level; deeper than this it
# could run out of stack, so such texts go through the guarded Python composer.
C_COMPOSER_SAFE_DEPTH = 2000
# libyaml's scanner does work in proportion to the flow nesting level for every
# token, so a text whose flow nesting could average more than this per character
# goes through the guarded composer too, which stops at MAX_DEPTH.
FLOW_WORK_PER_CHAR = 64

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MISSING = object()

# A document marker: "---" or "..." at the start of a line, followed by a blank or the end.
_DOCUMENT_MARKER = re.compile(r"^(?:---|\.\.\.)(?=[ \t\r\n]|\Z)", re.MULTILINE)


class YamlProblem(Exception):
    """A document that cannot be taken in; the message says where (line and column, from 1) and why.

    ``syntax`` is set when the text is not YAML at all; nothing after it in the
    same text can be read. ``label`` is the ``Kind namespace/name`` of the
    object concerned, when that much could be read.
    """

    def __init__(
        self, message: str, *, line: int, column: int, syntax: bool = False, label: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.syntax = syntax
        self.label = label


@dataclass(frozen=True, slots=True)
class YamlDocument:
    """One document: its value (None for an empty one), or the problem that keeps it out."""

    value: Any
    problem: YamlProblem | None = None


def alias_ratio_allowed(values: int) -> float:
    """The share of a document's values that may come from aliases (go-yaml's ``allowedAliasRatio``)."""
    if values <= ALIAS_RANGE_LOW:
        return 0.99
    if values >= ALIAS_RANGE_HIGH:
        return 0.10
    return 0.99 - 0.89 * (values - ALIAS_RANGE_LOW) / (ALIAS_RANGE_HIGH - ALIAS_RANGE_LOW)


def _syntax_problem(err: yaml.YAMLError) -> YamlProblem:
    """PyYAML's text names "<unicode string>"; say line and column in the text instead."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        detail = str(err.problem)
        if err.context:
            context = err.context
            if err.context_mark is not None:
                context += f" at line {err.context_mark.line + 1}, column {err.context_mark.column + 1}"
            detail += f" ({context})"
        line, column = mark.line + 1, mark.column + 1
        return YamlProblem(
            f"line {line}, column {column}: {' '.join(detail.split())}", line=line, column=column, syntax=True
        )
    return YamlProblem(" ".join(str(err).split()), line=1, column=1, syntax=True)


# libyaml 0.2.6 and later (in PyYAML 6.0.4's wheels) stop at their own nesting limit, 1,000
# levels, which their scanner can reach ahead of the guarded composer's MAX_DEPTH.
_LIBYAML_NESTING = "exceeded maximum nesting depth"


def _nesting_problem(err: yaml.YAMLError) -> YamlProblem | None:
    """libyaml's nesting limit said as :data:`MAX_DEPTH`'s is (it is the same refusal, reached later)."""
    if not isinstance(err, yaml.MarkedYAMLError) or err.problem_mark is None:
        return None
    if not str(err.problem).startswith(_LIBYAML_NESTING):
        return None
    mark = err.problem_mark
    message = f"{_too_deep(mark)}; the rest of the text is not read"
    return YamlProblem(message, line=mark.line + 1, column=mark.column + 1)


class _Refused(Exception):
    def __init__(
        self,
        node: Node,
        message: str,
        *,
        with_path: bool = True,
        path_to: Node | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(message)
        self.node = node
        self.message = message
        self.with_path = with_path
        self.path_to = path_to  # the map holding a duplicate key
        self.key = key


def _at(mark: Any) -> str:
    return f"at line {mark.line + 1}, column {mark.column + 1}"


def _unsupported(node: Node) -> str:
    shown = node.tag.replace("tag:yaml.org,2002:", "!!")
    return (
        f"tag {shown} {_at(node.start_mark)} is not supported: a manifest holds maps, lists, strings, "
        "numbers, booleans and null"
    )


def _too_deep(mark: Any) -> str:
    return f"nested more than {MAX_DEPTH} levels deep {_at(mark)}"


class _TooDeep(Exception):
    def __init__(self, mark: Any) -> None:
        super().__init__("too deep")
        self.mark = mark


_PLAIN_TAGS: dict[str, str] = {}
_PLAIN_TAGS_MAX = 100_000


def cached_resolve(resolver: Resolver, kind: type[Node], value: Any, implicit: Any) -> str:
    """PyYAML's ``Resolver.resolve``, remembering the tag of each plain scalar (keys repeat endlessly).

    The tag of a plain scalar depends on its text alone here: no path resolvers
    are added, and the implicit ones are PyYAML's fixed set. Loaders and
    dumpers alike take it as their ``resolve`` method.
    """
    if kind is ScalarNode:
        if not implicit[0]:
            return _STR
        tag = _PLAIN_TAGS.get(value)
        if tag is None:
            tag = str(Resolver.resolve(resolver, kind, value, implicit))  # type: ignore[no-untyped-call]
            if len(_PLAIN_TAGS) < _PLAIN_TAGS_MAX:
                _PLAIN_TAGS[value] = tag
        return tag
    return str(Resolver.resolve(resolver, kind, value, implicit))  # type: ignore[no-untyped-call]


class CachedResolver(Resolver):
    resolve = cached_resolve
    # No path resolvers are added, so there is nothing to track on the way down
    # and up; libyaml's composer still calls these once per node, and a C
    # builtin that takes the same arguments is the cheapest call that does nothing.
    descend_resolver = slice  # type: ignore[assignment]
    ascend_resolver = tuple  # type: ignore[assignment]


class _DepthGuardComposer(Composer):
    """PyYAML's composer, stopping at :data:`MAX_DEPTH` instead of recursing without bound."""

    _depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self._depth >= MAX_DEPTH:
            raise _TooDeep(self.peek_event().start_mark)  # type: ignore[attr-defined]
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


try:
    from yaml._yaml import CParser

    class _FastLoader(CParser, SafeConstructor, CachedResolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            CachedResolver.__init__(self)

    class _GuardedLoader(_DepthGuardComposer, CParser, SafeConstructor, CachedResolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            CachedResolver.__init__(self)

    HAVE_LIBYAML = True
except ImportError:  # PyYAML built without libyaml: the pure-Python parser, guarded

    class _GuardedLoader(  # type: ignore[no-redef]
        _DepthGuardComposer, Reader, Scanner, Parser, SafeConstructor, CachedResolver
    ):
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            CachedResolver.__init__(self)

    HAVE_LIBYAML = False


def _chunks(text: str) -> list[tuple[int, int]]:
    """Spans no document reaches past: split at each ``---`` or ``...`` at the start of a line."""
    return list(pairwise([0, *(m.start() for m in _DOCUMENT_MARKER.finditer(text)), len(text)]))


def _flow_bound(text: str, start: int, end: int) -> int:
    """At most how deep flow collections nest in ``text[start:end]``.

    Each flow level but the innermost needs its own ``[`` or ``{`` that is not
    closed at once (``[]`` and ``{}`` nest nothing).
    """
    openers = text.count("[", start, end) + text.count("{", start, end)
    return openers - text.count("[]", start, end) - text.count("{}", start, end) + 1


def nesting_bound(text: str) -> int:
    """An upper bound of how deep any document of ``text`` nests, computed at C speed.

    A block collection nested in another starts at least one column further
    right, except a sequence directly under a map key, so block nesting is at
    most twice the longest line plus two; flow nesting is bounded by
    :func:`_flow_bound` within one document, and a document never reaches past
    a ``---`` or ``...`` at the start of a line.
    """
    return 2 * (_longest_line(text) + 1) + max(_flow_bound(text, a, b) for a, b in _chunks(text))


def _longest_line(text: str) -> int:
    return max(map(len, text.split("\n")))


def _c_composer_is_safe(text: str) -> bool:
    """Whether libyaml's composer can take ``text``: no stack overflow, no runaway scanning."""
    # The whole text's flow bound is at least each document's (the spans only
    # split the unclosed openers between them), so when it passes both limits
    # every span does, and a text of thousands of documents is not split.
    whole = _flow_bound(text, 0, len(text))
    if whole <= FLOW_WORK_PER_CHAR and 2 * (_longest_line(text) + 1) + whole <= C_COMPOSER_SAFE_DEPTH:
        return True
    if nesting_bound(text) > C_COMPOSER_SAFE_DEPTH:
        return False
    work = sum(_flow_bound(text, a, b) * (b - a) for a, b in _chunks(text))
    return work <= FLOW_WORK_PER_CHAR * max(len(text), 1)


def _scalar_text(node: Node | None) -> str:
    return node.value if isinstance(node, ScalarNode) else ""


def _child(node: Node, key: str) -> Node | None:
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if isinstance(k, ScalarNode) and k.value == key:
                return v  # type: ignore[no-any-return]
    return None


def _label(node: Node) -> str:
    """``Kind namespace/name`` of an object node, from what is written."""
    kind = _scalar_text(_child(node, "kind"))
    meta = _child(node, "metadata")
    name = _scalar_text(_child(meta, "name")) if meta is not None else ""
    namespace = _scalar_text(_child(meta, "namespace")) if meta is not None else ""
    if not kind:
        return ""
    ident = f"{namespace}/{name}" if namespace else name
    if not ident.isprintable():
        ident = repr(ident)
    return f"{kind} {ident}" if ident else kind


def _objects(root: Node) -> list[Node]:
    """The nodes that are objects: a ``kind: List``'s items, else the document itself."""
    items = _child(root, "items")
    if _scalar_text(_child(root, "kind")) == "List" and isinstance(items, SequenceNode):
        return list(items.value)
    return [root]


def _path_to(root: Node, target: Node) -> list[str | int] | None:
    """The keys and indexes that lead from ``root`` to ``target`` (first way found)."""
    stack: list[tuple[Node, list[str | int]]] = [(root, [])]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            for k, v in reversed(node.value):
                stack.append((v, [*path, _scalar_text(k)]))
        elif isinstance(node, SequenceNode):
            for i in reversed(range(len(node.value))):
                stack.append((node.value[i], [*path, i]))
    return None


class _Builder:
    """Python values from one composed document, checking every rule on the way."""

    def __init__(self, constructor: SafeConstructor) -> None:
        self.constructor = constructor
        self.memo: dict[int, Any] = {}  # collection node -> its value (an alias shares it)
        self.sizes: dict[int, int] = {}  # collection node -> values it expands to
        self.active: set[int] = set()
        self.values = 0
        self.aliased = 0

    def build(self, node: Node, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _Refused(node, _too_deep(node.start_mark), with_path=False)
        cls = node.__class__
        if cls is ScalarNode:
            self.values += 1
            if node.tag == _STR:
                return node.value
            return self._scalar(node)  # type: ignore[arg-type]
        key = id(node)
        done = self.memo.get(key, _MISSING)
        if done is not _MISSING:  # an alias: the value is shared, its size counts again
            size = self.sizes[key]
            self.values += size
            self.aliased += size
            self._check_aliasing(node)
            return done
        if key in self.active:
            raise _Refused(node, f"an alias refers to a collection that contains it {_at(node.start_mark)}")
        if node.tag not in (_MAP, _SEQ):
            raise _Refused(node, _unsupported(node))
        start = self.values
        self.values += 1
        self.active.add(key)
        value: Any = (
            self._mapping(node, depth)  # type: ignore[arg-type]
            if cls is MappingNode
            else self._sequence(node, depth)  # type: ignore[arg-type]
        )
        self.active.discard(key)
        self.memo[key] = value
        self.sizes[key] = self.values - start
        return value

    def _check_aliasing(self, node: Node) -> None:
        values, aliased = self.values, self.aliased
        if (
            aliased > ALIAS_MIN_ALIASED
            and values > ALIAS_MIN_VALUES
            and aliased / values > alias_ratio_allowed(values)
        ):
            raise _Refused(
                node,
                f"excessive aliasing {_at(node.start_mark)}: the document expands to {values:,} values, "
                f"{aliased:,} of them through aliases; refused, as the API server refuses alias bombs",
            )

    # _mapping and _sequence take plain strings, most values by far, without a call to build.

    def _sequence(self, node: SequenceNode, depth: int) -> list[Any]:
        out: list[Any] = []
        strings = 0
        inner = depth + 1
        for child in node.value:
            if child.__class__ is ScalarNode and child.tag == _STR and inner <= MAX_DEPTH:
                out.append(child.value)
                strings += 1
            else:
                out.append(self.build(child, inner))
        self.values += strings
        return out

    def _mapping(self, node: MappingNode, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merges: list[Node] = []
        inner = depth + 1
        counted = 0  # keys, and values that are plain strings
        for key_node, value_node in node.value:
            if key_node.__class__ is not ScalarNode:
                raise _Refused(
                    key_node, f"a map key must be a string, not a map or a list {_at(key_node.start_mark)}"
                )
            counted += 1
            if key_node.tag == _MERGE:
                merges.append(value_node)
                continue
            key = key_node.value
            if key in out:
                raise _Refused(key_node, "", path_to=node, key=key)
            if value_node.__class__ is ScalarNode and value_node.tag == _STR and inner <= MAX_DEPTH:
                out[key] = value_node.value
                counted += 1
            else:
                out[key] = self.build(value_node, inner)
        self.values += counted
        if merges:
            out = self._merged(merges, out, depth)
        return out

    def _merged(self, merges: list[Node], own: dict[str, Any], depth: int) -> dict[str, Any]:
        """YAML merge keys (``<<: *base``): the map's own keys win, then earlier sources."""
        sources: list[Node] = []
        for merge in merges:
            sources += merge.value if isinstance(merge, SequenceNode) else [merge]
        out: dict[str, Any] = {}
        for source in reversed(sources):
            value = self.build(source, depth + 1)
            if not isinstance(value, dict):
                raise _Refused(
                    source, f"a merge key (<<) takes a map or a list of maps {_at(source.start_mark)}"
                )
            out.update(value)
        out.update(own)
        return out

    def _scalar(self, node: ScalarNode) -> Any:
        tag = node.tag
        c = self.constructor
        if tag == _INT:
            number = c.construct_yaml_int(node)
            return number if INT64_MIN <= number <= INT64_MAX else node.value
        if tag == _FLOAT:
            return c.construct_yaml_float(node)
        if tag == _BOOL:
            return c.construct_yaml_bool(node)
        if tag == _NULL:
            return None
        if tag == _TIMESTAMP:
            return node.value
        raise _Refused(node, _unsupported(node))


def _refusal(root: Node, err: _Refused) -> YamlProblem:
    mark = err.node.start_mark
    owner = root
    for obj in _objects(root):
        if obj.start_mark.index <= mark.index <= obj.end_mark.index:
            owner = obj
            break
    message = err.message
    if err.path_to is not None and err.key is not None:
        path = _path_to(owner, err.path_to) or []
        first = next(k for k, _ in err.path_to.value if _scalar_text(k) == err.key)
        message = (
            f"{join_path(*path, err.key)}: duplicate key {err.key!r} {_at(mark)}, first given "
            f"{_at(first.start_mark)}; a key may appear once in a map, as the API server's strict field "
            "validation requires"
        )
    elif err.with_path:
        path = _path_to(owner, err.node) or []
        if path:
            message = f"{join_path(*path)}: {message}"
    return YamlProblem(message, line=mark.line + 1, column=mark.column + 1, label=_label(owner))


def _oversized(text: str, root: Node) -> YamlProblem | None:
    for obj in _objects(root):
        start, end = obj.start_mark.index, obj.end_mark.index
        chars = end - start
        if chars * 4 <= MAX_OBJECT_BYTES:
            continue  # a character is at most 4 bytes of UTF-8
        size = len(text[start:end].encode("utf-8", errors="surrogatepass"))
        if size > MAX_OBJECT_BYTES:
            mark = obj.start_mark
            return YamlProblem(
                f"the object {_at(mark)} is {size:,} bytes; the API server takes at most "
                f"{MAX_OBJECT_BYTES:,} bytes (3 MiB) per object",
                line=mark.line + 1,
                column=mark.column + 1,
                label=_label(obj),
            )
    return None


def _document(text: str, root: Node, constructor: SafeConstructor) -> YamlDocument:
    problem = _oversized(text, root)
    if problem is not None:
        return YamlDocument(None, problem)
    try:
        return YamlDocument(_Builder(constructor).build(root, 1))
    except _Refused as err:
        return YamlDocument(None, _refusal(root, err))


def _guarded_documents(text: str) -> Iterator[YamlDocument]:
    loader = _GuardedLoader(text)
    try:
        while loader.check_node():
            try:
                node = loader.get_node()
            except _TooDeep as err:
                # Reading on to the document's end would cost the scanner work at that depth
                # for every token left; like a syntax error, this ends the text.
                mark = err.mark
                message = f"{_too_deep(mark)}; the rest of the text is not read"
                yield YamlDocument(None, YamlProblem(message, line=mark.line + 1, column=mark.column + 1))
                return
            if node is not None:
                yield _document(text, node, loader)
    finally:
        loader.dispose()


def _fast_documents(text: str) -> Iterator[YamlDocument]:
    loader = _FastLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                yield _document(text, node, loader)
    finally:
        loader.dispose()


def uses_libyaml_composer(text: str) -> bool:
    """Whether :func:`load_documents` composes ``text`` with libyaml (else with the guarded composer)."""
    return HAVE_LIBYAML and _c_composer_is_safe(text)


def load_documents(text: str, *, libyaml_composer: bool | None = None) -> Iterator[YamlDocument]:
    """Every document of ``text``, in order.

    A document that breaks a rule comes with its problem, and the next one is
    read. A syntax error ends the text (nothing after it can be read): it comes
    last, as a document with a ``syntax`` problem. So does nesting deeper than
    :data:`MAX_DEPTH` in a text that needs the guarded composer.

    ``libyaml_composer`` imposes the choice :func:`uses_libyaml_composer` makes
    otherwise, for a part of a text read as the whole text would be.
    """
    safe = uses_libyaml_composer(text) if libyaml_composer is None else HAVE_LIBYAML and libyaml_composer
    documents = _fast_documents(text) if safe else _guarded_documents(text)
    try:
        yield from documents
    except yaml.YAMLError as err:
        yield YamlDocument(None, _nesting_problem(err) or _syntax_problem(err))


def load_one(text: str) -> Any:
    """The one document of ``text`` (None when empty); raises :class:`YamlProblem`."""
    found: list[YamlDocument] = list(load_documents(text))
    for document in found:
        if document.problem is not None:
            raise document.problem
    if len(found) > 1:
        raise YamlProblem(f"expected one document, found {len(found)}", line=1, column=1)
    return found[0].value if found else None
