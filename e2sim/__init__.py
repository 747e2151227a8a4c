"""KPM simulator of 5G NR, Wi-Fi and LiFi access nodes."""
