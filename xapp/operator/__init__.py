"""The operator's API: overrides, roles, audit."""
