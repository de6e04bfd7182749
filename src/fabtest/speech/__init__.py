"""Offline speech for voice scenarios: a voice that speaks the user's words and a recogniser that
hears the agent's reply (``pip install 'pytest-fabtest[voice]'``, nothing downloaded at run time).

:mod:`fabtest.speech.kit` builds the pair ``[tool.fabtest.speech]`` names, once per process;
the engines are :mod:`~fabtest.speech.piper_tts` (the default neural voice),
:mod:`~fabtest.speech.espeak_tts` (the light one), :mod:`~fabtest.speech.sphinx` (the default
recogniser, pocketsphinx with its bundled English model) and :mod:`~fabtest.speech.whisper`
(faster-whisper, for users who have its model).
"""
