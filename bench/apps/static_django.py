"""Django project serving static files through WhiteNoise, a one-module
project (bench/static.py's WhiteNoise arms).

WhiteNoiseMiddleware answers every path under STATIC_URL (/static/) from
STATIC_ROOT, the folder named by $SLUICE_BENCH_STATIC, before Django's
URL routing; anything else gets the hello-world body. Settings are a
production-like minimum: DEBUG off (so WhiteNoise reads the folder once,
at start, and never looks for files per request), no database, the
common middleware after WhiteNoise's, as WhiteNoise's documentation
places it. `:application` is the WSGI handler.
"""

import os

import django
from django.conf import settings
from django.http import HttpResponse
from django.urls import path

settings.configure(
    DEBUG=False,
    SECRET_KEY="bench-only-not-secret",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=[],
    MIDDLEWARE=[
        "django.middleware.security.SecurityMiddleware",
        "whitenoise.middleware.WhiteNoiseMiddleware",
        "django.middleware.common.CommonMiddleware",
    ],
    DATABASES={},
    USE_TZ=True,
    STATIC_URL="/static/",
    STATIC_ROOT=os.environ["SLUICE_BENCH_STATIC"],
)
django.setup()


def index(request):
    return HttpResponse(b"Hello, World!", content_type="text/plain")


urlpatterns = [path("", index)]

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()
