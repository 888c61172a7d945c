"""The scenario language: YAML reading, the sections and their validation messages, the cost limits, the schema."""
