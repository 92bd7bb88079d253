"""Turning Exercism-layout Python exercises into tasks (``kit tasks import-exercism``): the importer and
the severity rule."""
