"""Cranfield's HTTP API: a Flask application around the ``cranfield`` engine."""
