"""`RetrainingSchedule` and EventBridge schedule expressions.

May import: `pipelines` and everything below it.
"""
