"""The ASGI app gunicorn serves: `gunicorn -c app/web/gunicorn_conf.py wsgi:app` (as
`petstore serve` does; its worker is app/web/worker.py)."""

from app.web import create_app

app = create_app()
