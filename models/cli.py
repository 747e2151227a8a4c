"""`atsss train …`: train, export and evaluate capacity models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

train_app = typer.Typer(
    help="Train capacity models (nr, wifi, lifi), export them to ONNX, evaluate them.",
    invoke_without_command=True,
)
out = Console(width=110)
err = Console(stderr=True, width=110)


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@train_app.callback()
def train_command(
    ctx: typer.Context,
    access: Annotated[str | None, typer.Option(help="nr, wifi or lifi.")] = None,
    data: Annotated[
        list[Path] | None, typer.Option(help="CSV/Parquet files or folders (repeatable).")
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Where the ONNX files and the card go.")
    ] = Path("build/models"),
    holdout: Annotated[
        list[Path] | None,
        typer.Option(
            help="Data never trained on, scored as out of distribution (repeatable; the card "
            "reports each file)."
        ),
    ] = None,
    folds: Annotated[int, typer.Option(help="Grouped cross-validation folds.")] = 6,
    quick: Annotated[bool, typer.Option(help="Small models, for tests and a first look.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Train with grouped cross-validation, pick a model, export it with a parity check."""
    if ctx.invoked_subcommand is not None:
        return
    # scikit-learn and pandas take a second to import: only when training
    from models.data import DataError, load
    from models.train import PUBLISHED_ANCHORS, TrainingError, export, train, usable_rows

    if access is None or not data:
        _fail("give --access and at least one --data (or use `atsss train eval`)")
    if access not in ("nr", "wifi", "lifi"):
        _fail(f"--access is nr, wifi or lifi, not {access!r}")
    if folds < 2:
        _fail(f"--folds must be ≥ 2, got {folds}")
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    try:
        with Progress(*columns, console=err, transient=True, disable=as_json) as progress:
            task = progress.add_task("loading data", total=None)
            frame, report = load(data, access)
            unseen = {path.stem: load([path], access)[0] for path in holdout or []}
            result = train(
                frame,
                access,
                report,
                folds,
                quick,
                lambda step: progress.update(task, description=step),
                unseen,
            )
            progress.update(task, description="exporting to ONNX (parity check)")
            features, _, _, _ = usable_rows(frame, access)
            card = export(result, out_dir, features[: min(len(features), 5000)])
    except (DataError, TrainingError) as error:
        _fail(str(error))
    if as_json:
        typer.echo(json.dumps(card))
        return
    for warning in report.warnings[:10]:
        err.print(f"[yellow]note:[/] {warning}")
    table = Table(
        title=f"{access}: grouped {folds}-fold cross-validation, "
        f"{result.groups} groups, {result.rows} rows"
    )
    for column in ("model", "R²", "MAE (Mbit/s)", "MAPE"):
        table.add_column(column)
    for name, m in result.cv.items():
        marker = " ← chosen" if name == result.chosen else ""
        table.add_row(name + marker, f"{m.r2:.3f}", f"{m.mae_mbps:.2f}", f"{m.mape:.1%}")
    if access == "nr":
        for label, r2 in PUBLISHED_ANCHORS.items():
            table.add_row(f"[dim]{label}[/]", f"[dim]{r2:.2f}[/]", "", "")
    out.print(table)
    if result.cv_by_source or result.out_of_distribution:
        scores = Table(title=f"{result.chosen}: in distribution (cross-validation) and out of it")
        for column in ("data", "R²", "MAE (Mbit/s)", "MAPE", "rows"):
            scores.add_column(column)
        rows = [(f"cv: {k}", m) for k, m in result.cv_by_source.items()]
        rows += [(f"unseen: {k}", m) for k, m in result.out_of_distribution.items()]
        for label, m in rows:
            scores.add_row(label, f"{m.r2:.3f}", f"{m.mae_mbps:.2f}", f"{m.mape:.1%}", str(m.rows))
        out.print(scores)
    out.print(
        f"10–90 % interval coverage: {result.interval_coverage:.1%}; rules applied: {report.counts}"
    )
    out.print(f"wrote {out_dir / (access + '.card.json')} and its ONNX files")


@train_app.command("eval")
def evaluate_command(
    model: Annotated[Path, typer.Option(help="A model card (<access>.card.json).")],
    data: Annotated[list[Path], typer.Option(help="CSV/Parquet files or folders (repeatable).")],
    report_dir: Annotated[
        Path | None, typer.Option("--report", help="Write report.md and PNG plots here.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Evaluate any model on any data: R², MAE, MAPE, interval coverage, error by range."""
    from models.data import DataError, load
    from models.report import evaluate, write_report
    from models.runtime import ModelError, OnnxCapacityModel

    try:
        loaded = OnnxCapacityModel(model)
        frame, _ = load(data, loaded.access)
        evaluation = evaluate(loaded, frame)
    except (ModelError, DataError) as error:
        _fail(str(error))
    if report_dir is not None:
        page = write_report(evaluation, model.name, report_dir)
        err.print(f"report: {page}")
    if as_json:
        typer.echo(json.dumps(evaluation.as_dict()))
        return
    m = evaluation.metrics
    out.print(
        f"{model.name} on {m.rows} rows: R² {m.r2:.3f}, MAE {m.mae_mbps:.2f} Mbit/s, "
        f"MAPE {m.mape:.1%}, interval coverage {evaluation.coverage:.1%}"
    )
