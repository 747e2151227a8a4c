"""E2SM-KPM and E2AP codecs and the KPI catalogue."""
