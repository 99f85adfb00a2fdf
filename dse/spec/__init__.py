"""User-facing schemas and the YAML loader."""
