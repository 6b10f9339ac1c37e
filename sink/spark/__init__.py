"""The pipeline on Spark (placeholder docstring until the kafka-source branch lands)."""
