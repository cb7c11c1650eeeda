"""djrest's WSGI handler. As a deployed project's wsgi.py does, plus the
URLconf imported here rather than at the first request, so that the
whole app (admin, DRF, the viewsets) is loaded when this module is."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djrest.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.urls import get_resolver  # noqa: E402

application = get_wsgi_application()
get_resolver().url_patterns  # imports djrest.urls, the admin, DRF's views

# The data: bench/preload.py runs migrate and seed() before any server.


def seed(n=50):
    import datetime

    from djrest.models import Book

    Book.objects.all().delete()
    Book.objects.bulk_create(
        Book(title="Book %d" % i, author="Author %d" % (i % 7),
             isbn="%013d" % (9780000000000 + i), pages=100 + i,
             published=datetime.date(2000 + i % 20, 1 + i % 12, 1 + i % 28),
             in_print=i % 3 != 0)
        for i in range(n))
