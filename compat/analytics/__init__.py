"""Job-history analytics on Spark (``respqueue analytics``) and its HTML report.

``job`` holds the Spark computation (also runnable with ``spark-submit compat/analytics/job.py SRC OUT``),
``report`` renders the self-contained HTML report. Nothing here is imported by the server.
"""
