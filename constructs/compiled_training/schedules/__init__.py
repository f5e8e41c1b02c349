"""RetrainingSchedule and EventBridge schedule expressions."""
