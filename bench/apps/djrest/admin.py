from django.contrib import admin

from djrest.models import Book


@admin.register(Book)
class BookAdmin(admin.ModelAdmin):
    list_display = ("title", "author", "published", "in_print")
    search_fields = ("title", "author")
