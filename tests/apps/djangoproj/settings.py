"""Settings for the e2e Django project: no database, CSRF kept on.

CSRF protection stays enabled (CsrfViewMiddleware) so the tests exercise
the cookie + token round trip through the server; one view is exempt.
"""

import os
import tempfile

SECRET_KEY = "e2e-tests-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "djangoproj.urls"
WSGI_APPLICATION = "djangoproj.wsgi.application"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
]

MIDDLEWARE = [
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
]

# No database at all: nothing in the project touches the ORM.
DATABASES = {}

USE_TZ = True
TIME_ZONE = "UTC"
APPEND_SLASH = True

# Uploads above this size go to a temporary file, so both upload paths run.
FILE_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024
FILE_UPLOAD_TEMP_DIR = os.environ.get("E2E_TMP", tempfile.gettempdir())

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}
