"""The Lambda function that records a benchmark's verdict in SSM."""
