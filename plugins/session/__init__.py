"""Sessions: the JSON codec, the event model, crash repair and message derivation."""
