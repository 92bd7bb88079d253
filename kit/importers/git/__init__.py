"""Tasks from a repository's history: ``kit tasks import-git REPO --commit SHA | --range BASE..HEAD``.

:mod:`.importer` runs the steps; each module is one of them: :mod:`.gitread` (reading the repository,
untrusted), :mod:`.plan` (which files and tests the change touches), :mod:`.testfiles` (test functions
by ``ast``; a module cut down to chosen tests), :mod:`.layout` (the files laid with the hidden tests;
the repository's import names), :mod:`.probe` (checks through the kit's scorer and sandbox),
:mod:`.severity` (the severity rule), :mod:`.prompt` (the generated prompt and its Interface
section), :mod:`.writer` (the task folder). The task format is documented in ``docs/tasks.md``.
"""
