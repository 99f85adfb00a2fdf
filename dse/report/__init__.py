"""Tables and plots: compute the data (pure), then render."""
