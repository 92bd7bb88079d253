"""CSV export of rows."""

from exporter.export import export_csv, format_row, format_value

__all__ = ["export_csv", "format_row", "format_value"]
