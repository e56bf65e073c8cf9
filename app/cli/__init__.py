"""The command line: the composition root, the only app package allowed to import models and ui."""
