"""Django JSON endpoint of the frameworks suite, a one-module project:
settings are configured here, the URLconf is this module, and GET /
answers {"message": "Hello, World!"} through JsonResponse.

fw_django:application is the WSGI handler, fw_django:asgi_application
Django's own ASGI handler (Debian's Django 3.2). Settings are a
production-like minimum: DEBUG off, no database, the common middleware.
"""

import django
from django.conf import settings
from django.http import JsonResponse
from django.urls import path

settings.configure(
    DEBUG=False,
    SECRET_KEY="bench-only-not-secret",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=[],
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    DATABASES={},
    USE_TZ=True,
)
django.setup()


def index(request):
    return JsonResponse({"message": "Hello, World!"})


urlpatterns = [path("", index)]

from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()
asgi_application = get_asgi_application()
