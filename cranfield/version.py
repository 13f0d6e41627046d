"""The engine's version, in a module of its own so that modules below the package root can
name it without importing the root (which imports them)."""

__version__ = "0.1.0"
