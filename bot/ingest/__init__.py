"""Alert ingest: parse Alertmanager and JSON webhook payloads into ``Alert``s, and plan."""
