"""The e2e Django project (tests/apps/djangoproj) through Django's own ASGI
handler: asgi_django:application."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djangoproj.settings")

application = get_asgi_application()
