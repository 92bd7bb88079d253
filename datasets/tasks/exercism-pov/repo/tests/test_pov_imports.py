def test_module_imports():
    import pov  # noqa: F401
