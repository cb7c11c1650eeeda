"""A minimal Django project served by sluice in the end-to-end tests."""
