"""orchbench: measure how different ways of orchestrating LLM agents do on the same coding task."""

__version__ = "0.1.0"
