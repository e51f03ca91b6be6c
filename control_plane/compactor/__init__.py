"""The daily compactor: old raw events of a (scope, scope ref) become one curated entry."""
