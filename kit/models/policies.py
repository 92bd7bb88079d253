"""Built-in named scripted policies (filled in with the agent loop)."""

POLICIES: dict = {}
