"""The package version (part of every compile-cache key)."""

__version__ = "0.1.0"
