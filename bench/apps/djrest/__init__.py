"""A small Django project for bench/preload.py: django.contrib.admin (with
auth, contenttypes, sessions, messages), Django REST framework, one model
with a serializer, a viewset and a router, sqlite. djrest.wsgi:application
is its WSGI handler; everything is imported when that module is."""
