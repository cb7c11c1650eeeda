from django.urls import path

from djangoproj import views

urlpatterns = [
    path("", views.index),
    path("form/", views.form),
    path("csrf-form/", views.csrf_form),
    path("upload/", views.upload),
    path("redirect/", views.go_elsewhere),
    path("target/", views.target, name="target"),
    path("stream/", views.stream),
    path("meta/", views.meta),
]
