"""Reports: Markdown, HTML (Jinja2, autoescaped), JSON, SVG figures and plots; comparisons of runs."""
