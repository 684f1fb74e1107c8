"""Value containers, one module per Redis type.

Strings are plain ``bytes``. Every other type is a class with an ``rtype``
attribute (the TYPE reply) and the small interface its commands use, so that
``compat/`` can plug in a specialised container for a key pattern (e.g. an
indexed job list for ``bull:*:wait``) without touching command code. Each
container also offers ``copy()`` (COPY), ``encoding()`` (OBJECT ENCODING)
and ``memory_usage()`` (MEMORY USAGE).
"""
