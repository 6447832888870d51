"""The exporter's exception hierarchy: one root, one subclass per kind of fault."""


class ExporterError(Exception):
    """Root of every error the exporter raises on purpose."""


class ConfigError(ExporterError):
    """Invalid configuration; carries every problem found, each with its file and key."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class SourceError(ExporterError):
    """A hardware source could not be read as a whole (not one bad value: those are counted)."""


class CollectorTimeoutError(ExporterError):
    """A collector did not finish before its deadline (a hung driver call, for instance)."""
