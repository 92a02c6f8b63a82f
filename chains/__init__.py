"""Design configurations and example tenants' chain specifications (TOML data, no code)."""
