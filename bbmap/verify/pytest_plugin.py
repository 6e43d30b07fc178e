"""pytest plugin entry point (registered as ``pytest11``); fixtures are added by bbmap.verify."""
