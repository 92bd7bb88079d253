"""What the kit does to input it does not trust -- a user's repository, a task folder, an agent's output:
``confine`` checks every path before it is read, written or unlinked; ``terminal`` escapes text before
it reaches a terminal (credentials in URLs are cut by ``kit.secrets``).

May import: ``kit.errors`` only (every layer uses these two).
"""
