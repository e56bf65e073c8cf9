"""Work off the UI thread: the engine worker that owns the models, background jobs, the
helper process."""
