"""Engine, sessions, ORM models and migrations of the control plane."""
