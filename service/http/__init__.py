"""The HTTP layer: one module per resource, all built on ``base.ApiHandler``."""
