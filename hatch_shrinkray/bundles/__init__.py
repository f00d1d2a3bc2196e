"""Shrinking the models of a directory tree that is shipped as it is: a PyInstaller onedir app, a
Briefcase app folder, a venv or the site-packages of a container image, an unpacked installer.

``tree`` finds the models (a link is shrunk through its target) and what a killed run left behind;
``records`` keeps the installed distributions' ``RECORD`` files true to the files they list;
``commit`` replaces files so that each is always either its original or complete; ``bundle``
puts it together over ``shipping.ship`` (the same decisions, cache, lines and manifest as a wheel);
``pyinstaller`` maps a PyInstaller spec's data files to shrunk copies before they are packed.
"""
