"""The admission log as an audit trail: replay, what-if, export and import."""
