"""What every layer of recaudit may import: the error hierarchy and the registries of named parts."""
