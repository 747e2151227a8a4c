"""`atsss xapp serve`: the xApp as one long-running process, in a RIC or standalone.

It assembles the parts from the deployment configuration:

- **state**: SDL (ricsdl over Redis at DBAAS_SERVICE_HOST/PORT) when the RIC provides it,
  memory otherwise;
- **E2**: in a RIC, RMR for the messages (``xapp.e2.rmr_adapter``, the only module that touches
  librmr) and the submgr's REST API for the subscriptions; standalone, the standalone E2
  termination on a TCP port;
- **HTTP** on the configured port: ``/ric/v1/health/alive|ready``, the submgr's notifications,
  ``/metrics``;
- **control**: the live control loop pushing to every CPE's agent and the proxy's agent.

Ready means "can serve": the configuration is loaded, SDL answers (when used) and, in a RIC,
RMR has a route table and the appmgr took the registration (``xapp.platform``); standalone, the
E2 termination listens. No E2 node's subscription holds readiness: each node's state is
reported and healed on its own (``xapp.e2.node_health``). SIGTERM stops pushing, deletes the
subscriptions, closes RMR, deregisters and exits within a few seconds; SIGHUP, or a change of
the configuration file, reloads it: new CPEs and nodes are picked up, removed ones
unsubscribed, and what the loop knows of the others is kept.

This module only assembles: the RIC platform's life is ``xapp.platform``, what the API reads is
``xapp.service_view``.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import uvicorn
from prometheus_client import CollectorRegistry, Gauge

from core.collector import settle_for_service
from core.deployment import AgentConfig, CpeConfig, Deployment, DeploymentError
from core.domain import SubscriptionRecord
from kpm.codec import compile_all
from models.runtime import ModelError, OnnxCapacityModel, find_model_card
from xapp.adapters.agent_http import AgentEndpoint, AgentSetupError
from xapp.adapters.audit_log import MemoryAuditLog, RedisAuditLog
from xapp.adapters.memory_store import MemoryStateStore
from xapp.adapters.redis_leases import RedisLeaseStore
from xapp.config import e2_settings, load_xapp_config, reporting_period_s
from xapp.control_loop import StepOutcome
from xapp.e2.config import E2Settings
from xapp.e2.indications import IndicationProcessor
from xapp.e2.messages import E2MessageHandler, SubscriptionOutcome
from xapp.e2.node_health import SubscriptionHealer
from xapp.e2.rest import create_app
from xapp.e2.stream import StandaloneE2Termination
from xapp.e2.subscriptions import SubmgrClient, SubscriptionManager
from xapp.estimators.selection import EstimatorSettings
from xapp.live import LiveControl, LiveSettings, LiveSetupError
from xapp.metrics import XappMetrics
from xapp.operator.api import create_router, install_dashboard, install_error_format
from xapp.operator.auth import Tokens, TokensError, load_tokens
from xapp.operator.guard import OperatorGuard
from xapp.operator.registry import CpeRefusedError, CpeRegistry
from xapp.operator.state import OperatorState, StoreUnavailableError, UnknownError
from xapp.ownership import Ownership
from xapp.platform import Check, Readiness, RicPlatform, evaluate
from xapp.policy.exploration import ExplorationConfig
from xapp.policy.weight_policy import PolicyConfig
from xapp.ports import XappStore
from xapp.push_record import StepPushes
from xapp.service_view import XappView

log = logging.getLogger(__name__)

E2Mode = Literal["ric", "standalone"]
# How often a replica looks for changes another replica made to the operator's state (one read
# of a version number in SDL), at most: both list an override set through either within a period.
SHARED_STATE_CHECK_S = 1.0


class ServiceError(RuntimeError):
    """The service cannot start as configured; the message says why in one line."""


@dataclass(frozen=True)
class ServeOptions:
    config_path: Path
    e2_mode: E2Mode
    e2_listen: tuple[str, int] = ("127.0.0.1", 36421)
    http_host: str = "0.0.0.0"
    http_port: int | None = None  # None: the configuration's e2.http_port
    watch_interval_s: float = 1.0  # how often the configuration file is checked for changes


def make_store(namespace: str) -> tuple[XappStore, bool]:
    """SDL when the RIC names its database (DBAAS_SERVICE_HOST), memory otherwise."""
    if not os.environ.get("DBAAS_SERVICE_HOST"):
        return MemoryStateStore(), False
    from xapp.adapters.sdl_store import SdlStateStore

    return SdlStateStore(namespace=namespace), True


def agent_endpoint(
    agent: AgentConfig, default_token_file: Path | None, secrets_folder: Path | None = None
) -> AgentEndpoint:
    """The agent as the xApp reaches it; ServiceError (one line) when it cannot be set up: its
    token file unreadable, its secret unknown, its CA file missing."""
    token_file = agent.token_file or default_token_file
    if agent.secret is not None:
        if secrets_folder is None:
            raise ServiceError(f"agent {agent.url}: secret given but agents.secrets_folder unset")
        token_file = secrets_folder / agent.secret
    token = None
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as error:
            raise ServiceError(
                f"agent {agent.url}: token file {token_file}: {error.strerror}"
            ) from None
    verify: bool | str = str(agent.ca_file) if agent.ca_file is not None else True
    try:
        return AgentEndpoint(agent.url, token, verify)
    except AgentSetupError as error:
        raise ServiceError(str(error)) from None


def live_settings(deployment: Deployment) -> LiveSettings:
    default_token = deployment.agents.token_file
    secrets = deployment.agents.secrets_folder
    return LiveSettings(
        cpe_agents={
            cpe.id: agent_endpoint(cpe.agent, default_token, secrets)
            for cpe in deployment.cpes
            if cpe.agent is not None
        },
        proxy_agent=(
            agent_endpoint(deployment.agents.proxy, default_token, secrets)
            if deployment.agents.proxy is not None
            else None
        ),
        downlink_via_cpe=deployment.agents.downlink_via_cpe,
        directions=deployment.directions,
        period_s=reporting_period_s(deployment),
        estimator=EstimatorSettings(
            mode=deployment.estimator,
            label_every_s=deployment.training_labels.every_s,
            labels_per_path=deployment.training_labels.per_path,
        ),
        policy=PolicyConfig(
            max_weight=deployment.policy.max_weight,
            outage_stall_s=deployment.policy.outage_stall_s,
        ),
        min_gain=deployment.policy.min_gain,
        max_pushes_per_s=deployment.policy.max_pushes_per_s,
        exploration=ExplorationConfig(
            step=deployment.exploration.step,
            max_step=deployment.exploration.max_step,
            pause_s=deployment.exploration.pause_s,
        )
        if deployment.exploration.enabled
        else None,
    )


def needs_restart(before: Deployment, after: Deployment) -> list[str]:
    """The keys whose change a reload cannot apply (read once at start): where the state lives,
    the ports, and a node's reporting period (the loop's period and the node's subscription)."""
    changed = [
        key
        for key, old, new in (
            ("sdl_namespace", before.sdl_namespace, after.sdl_namespace),
            ("e2.http_port", before.e2.http_port, after.e2.http_port),
            ("e2.rmr_port", before.e2.rmr_port, after.e2.rmr_port),
            ("e2.quiet_periods", before.e2.quiet_periods, after.e2.quiet_periods),
        )
        if old != new
    ]
    periods = {n.name: n.report_period_ms for n in before.e2.nodes}
    changed += [
        f"e2.nodes[{n.name}].report_period_ms"
        for n in after.e2.nodes
        if n.name in periods and periods[n.name] != n.report_period_ms
    ]
    return changed


class XappService:
    def __init__(self, options: ServeOptions, deployment: Deployment) -> None:
        self.options = options
        self.deployment = deployment
        self.registry = CollectorRegistry()
        self._ready_gauge = Gauge("atsss_ready", "1 when the xApp is ready", registry=self.registry)
        self.store, self.uses_sdl = make_store(deployment.sdl_namespace)
        cpes = deployment.domain_cpes()
        self.processor = IndicationProcessor(cpes, registry=self.registry)
        self.control = LiveControl(
            cpes, live_settings(deployment), store=self.store, on_step=self._observe_step
        )
        # Indications are decoded in the loop's thread, the newest period of each (see
        # xapp/e2/kpi_source.py): an xApp short of CPU decides late, not ever later.
        self.control.source.decode_with(self.processor)
        # With SDL, replicas share the CPEs out through leases; alone in memory, all are ours.
        self.ownership: Ownership | None = None
        if self.uses_sdl:
            replica = os.environ.get("HOSTNAME") or uuid.uuid4().hex[:8]
            leases = RedisLeaseStore(deployment.sdl_namespace)
            self.ownership = Ownership(leases, replica, reporting_period_s(deployment))
            self.control.owned = self.ownership.owned
            self.control.owned_elsewhere = self.ownership.owned_elsewhere
            # each push carries since when this replica holds the CPE: agents refuse a set of
            # an earlier holder that stalled past its lease (fencing)
            self.control.sink.epoch_of = self.ownership.epoch
        try:
            self.tokens = load_tokens(deployment.operator_api.tokens_file)
        except TokensError as error:
            raise ServiceError(str(error)) from None
        # Overrides reach the loop through its in-memory state: it acts on one at once.
        api_settings = deployment.operator_api
        audit_age_s = api_settings.audit_max_age_days * 86400
        self.audit_log: RedisAuditLog | MemoryAuditLog = (
            RedisAuditLog(deployment.sdl_namespace, api_settings.audit_max_entries, audit_age_s)
            if self.uses_sdl
            else MemoryAuditLog(api_settings.audit_max_entries, audit_age_s)
        )
        self.operator = OperatorState(
            self.control.state,
            self.store,
            lambda: self.control.cpes,
            audit_log=self.audit_log,
        )
        self.cpe_registry = CpeRegistry(self.store, self.operator)
        self._registry_unapplied = False  # entries read from SDL, not yet in force here
        self.file_deployment = deployment  # as the file says; self.deployment: in force
        self.control.estimator.choice = self.operator.estimator_choice
        self.control.estimator.choices = self.operator.estimator_choices
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._termination: StandaloneE2Termination | None = None
        self._manager: SubscriptionManager | None = None
        self._healer: SubscriptionHealer | None = None
        self._platform: RicPlatform | None = None
        if options.e2_mode == "ric":
            settings = e2_settings(deployment)
            self._manager = SubscriptionManager(
                settings, SubmgrClient(settings.submgr_url), self.store
            )
            self._healer = SubscriptionHealer(
                self._manager,
                lambda: e2_settings(self.deployment),
                self.processor.last_indication_s.get,
                quiet_periods=deployment.e2.quiet_periods,
            )
        self.view = XappView(
            self.control,
            self.store,
            self.operator,
            self.processor,
            lambda: self.deployment,
            self._subscription_records,
            self._healer.health if self._healer is not None else None,
        )
        self.metrics = XappMetrics(self.registry, self.view)
        self._http: uvicorn.Server | None = None
        self._config_mtime = _mtime(options.config_path)
        self._reload_lock = threading.Lock()

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        compile_all()  # before the first node connects, not while its reports queue up
        try:
            self.cpe_registry.load()
            in_force = self.cpe_registry.apply(self.file_deployment, check=self._check_cpes)
        except Exception as error:  # SDL down at start: the file's CPEs, writes refused
            log.error("CPEs added at run time not loaded from SDL: %s", error)
        else:
            if in_force != self.deployment:
                self._apply(in_force)
        try:
            self.operator.load()
        except Exception as error:  # SDL down at start: the API refuses writes until it answers
            log.error("operator overrides not loaded from SDL: %s", error)
        settle_for_service()  # codecs, models and configuration are built: out of the GC's walks
        self._start_http()
        if self.options.e2_mode == "standalone":
            self._start_standalone()
        else:
            self._start_ric()
        self._spawn("control-start", self._start_control)
        self._spawn("config-watch", self._watch_config)
        self._spawn("override-expiry", self._expire_overrides)
        if self.ownership is not None:
            self._spawn("ownership", self._keep_leases)

    def _spawn(self, name: str, target: Callable[[], object]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _start_http(self) -> None:
        port = self.options.http_port
        if port is None:
            port = self.deployment.e2.http_port
        app = create_app(
            self._manager,
            self.registry,
            self.readiness,
            routers=[create_router(self.view, self, self.operator, self.tokens)],
        )
        install_error_format(app)
        install_dashboard(app)
        # Outermost: the token and the body's size are checked before anything reads the body.
        app.add_middleware(
            OperatorGuard,
            tokens=lambda: self.tokens,
            anonymous_reads=lambda: self.deployment.operator_api.anonymous_reads,
        )
        config = uvicorn.Config(
            app,
            host=self.options.http_host,
            port=port,
            log_level="warning",
            lifespan="off",
        )
        self._http = uvicorn.Server(config)
        # Run in a thread, uvicorn leaves the process's signal handlers alone: ours stay.
        # Bind here so that a port in use fails the start with one line.
        try:
            sock = http_listening_socket(self.options.http_host, port)
        except OSError as error:
            raise ServiceError(
                f"cannot serve HTTP on {self.options.http_host}:{port}: {error.strerror}"
            ) from None
        server = self._http
        self._spawn("http", lambda: server.run(sockets=[sock]))
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline:
                raise ServiceError(f"HTTP server on port {port} did not start")
            time.sleep(0.02)
        self.http_address = (self.options.http_host, int(sock.getsockname()[1]))
        log.info("HTTP on %s:%d", *self.http_address)

    def _start_standalone(self) -> None:
        host, port = self.options.e2_listen
        try:
            self._termination = StandaloneE2Termination(
                e2_settings(self.deployment),
                self.processor,
                self.control.add_samples,
                self.store,
                host,
                port,
                on_indication=self.control.source.add_indication,
            )
        except OSError as error:
            raise ServiceError(f"cannot listen for E2 on {host}:{port}: {error.strerror}") from None
        self._termination.start()
        self.e2_address = self._termination.address
        log.info("listening for E2 nodes on %s:%d", *self.e2_address)

    def _start_ric(self) -> None:
        settings = e2_settings(self.deployment)
        # No E2 setup reaches an xApp in a RIC: what each node is comes from the configuration.
        for node in settings.nodes:
            self.processor.set_node(node, node.kpm_version)
        assert self._manager is not None
        assert self._healer is not None

        def handler_for(on_outcome: Callable[[SubscriptionOutcome], None]) -> E2MessageHandler:
            return E2MessageHandler(
                self.processor,
                self.control.add_samples,
                on_outcome,
                healthy=self.alive,
                on_indication=self.control.source.add_indication,
            )

        self._platform = RicPlatform(
            lambda: self.deployment,
            self.options.config_path,
            handler_for,
            self._manager,
            self._healer,
            self.uses_sdl,
            self._spawn,
        )
        try:
            self._platform.start()
        except RuntimeError as error:  # RmrStartError: the port taken, the library missing
            raise ServiceError(str(error)) from None

    def _subscription_records(self) -> dict[str, SubscriptionRecord]:
        if self._termination is not None:
            return self._termination.records()
        if self._manager is not None:
            return self._manager.records()
        return {}

    def _start_control(self) -> None:
        """Run the loop at once: each CPE and direction is steered as soon as its agent has
        said what it holds (asked in the background), whatever the other agents do."""
        while not self._stopping.is_set():
            try:
                self.control.prepare_without_waiting()
            except LiveSetupError as error:  # the configuration cannot work: say so, keep trying
                log.error("control loop not started: %s; trying again", error)
                self._stopping.wait(5.0)
                continue
            if not self._stopping.is_set():
                self.control.start()
            return

    def _observe_step(
        self, seconds: float, outcomes: Sequence[StepOutcome], sifted: StepPushes
    ) -> None:
        self.metrics.observe_step(
            seconds, outcomes, self.deployment.agents.downlink_via_cpe, sifted
        )

    def _keep_leases(self) -> None:
        ownership = self.ownership
        assert ownership is not None
        period = reporting_period_s(self.deployment)
        while not self._stopping.is_set():
            began = time.monotonic()
            try:
                ownership.refresh([c.cpe_id for c in self.control.cpes])
            except Exception as error:  # SDL down: leases run out, others may take over
                log.warning("leases not renewed: %s", error)
            # Renewed once a period from the start of one round to the next: a round that took
            # long (a busy replica, a big fleet) does not push the next one a period later,
            # where leases would fall under the period they must still have to be acted on.
            self._stopping.wait(max(0.05, period - (time.monotonic() - began)))

    def _expire_overrides(self) -> None:
        # a quarter period: another replica's change is in force here within the period
        check_s = min(SHARED_STATE_CHECK_S, reporting_period_s(self.deployment) / 4)
        failed: str | None = None  # the last pass's failure, if it failed
        while not self._stopping.wait(check_s):
            try:
                self.follow_shared_state()
                failed = None
            except Exception as error:  # one bad pass must not end the following for good
                # With its traceback once; the same failure again at each pass, in a line.
                if repr(error) != failed:
                    log.exception("changes of other replicas not followed this time")
                else:
                    log.debug("changes of other replicas still not followed: %s", error)
                failed = repr(error)
            try:
                expired = self.operator.expire()
            except StoreUnavailableError as error:
                log.warning("overrides not expired: %s", error)
                continue
            for override in expired:
                log.info("override %s on %s expired", override.override_id, override.cpe_id)

    def follow_shared_state(self) -> None:
        """What another replica changed (overrides, run-time CPEs) in force here too: one read
        of the version in SDL, and the documents only when it moved."""
        try:
            self.operator.refresh()
            # The entries are read once when they move; until what they say is in force here
            # (SDL can fail between the read and the apply) they are applied again each pass.
            if self.cpe_registry.refresh():
                self._registry_unapplied = True
            if self._registry_unapplied:
                with self._reload_lock:
                    in_force = self.cpe_registry.apply(self.file_deployment, check=self._check_cpes)
                    if in_force != self.deployment:
                        self._apply(in_force)
                self._registry_unapplied = False
        except StoreUnavailableError as error:
            log.warning("changes of other replicas not read: %s", error)

    # ------------------------------------------------------------------ health
    def alive(self) -> bool:
        return not self._stopping.is_set()

    def readiness(self) -> Readiness:
        checks: list[Check] = [
            lambda: None if self.alive() else "stopping",
            self._sdl_answers,
        ]
        if self._platform is not None:
            checks += self._platform.checks()
        elif self._termination is None:
            checks.append(lambda: "E2 not started")
        found = evaluate(checks)
        self._ready_gauge.set(1 if found.ready else 0)
        return found

    def ready(self) -> bool:
        return self.readiness().ready

    def _sdl_answers(self) -> str | None:
        if not self.uses_sdl:
            return None
        try:
            self.store.load_weights("-", self.deployment.directions[0])
        except Exception as error:  # ricsdl raises its own types when Redis is unreachable
            return f"SDL does not answer: {error}"
        return None

    # ------------------------------------------------------------------ reload
    def _watch_config(self) -> None:
        tokens_seen = self._tokens_signature()
        while not self._stopping.wait(self.options.watch_interval_s):
            mtime = _mtime(self.options.config_path)
            if mtime != self._config_mtime:
                self._config_mtime = mtime
                self.reload()
            elif self._tokens_signature() != tokens_seen:
                self._reload_tokens(self.file_deployment.operator_api.tokens_file)
            tokens_seen = self._tokens_signature()

    def _tokens_signature(self) -> tuple[float | None, ...]:
        """When the tokens file and the token files it names last changed (a Kubernetes secret
        rotation replaces the files behind their paths)."""
        return tuple(_mtime(path) for path in self.tokens.sources)

    def _reload_tokens(self, path: Path | None) -> None:
        """The operator tokens read again: a token removed stops working at once. A tokens file
        that no longer reads refuses every token until it is fixed (never open by accident)."""
        try:
            loaded = load_tokens(path)
        except TokensError as error:
            log.error("operator tokens not reloaded, every token refused until fixed: %s", error)
            sources = (path,) if path is not None else ()
            self.tokens.replace_with(Tokens.refusing_all(sources))
            return
        self.tokens.replace_with(loaded)
        log.info("operator tokens reloaded: %d in force", loaded.count)

    def reload(self) -> bool:
        """Read the configuration again and apply it, with the CPEs changed at run time on top;
        a bad file is logged and changes nothing."""
        with self._reload_lock:
            try:
                deployment = load_xapp_config(self.options.config_path)
                live_settings(deployment)  # agents' token files readable
                in_force = self.cpe_registry.apply(deployment)
                restart = needs_restart(self.file_deployment, deployment)
                if restart:
                    raise ServiceError(
                        f"{', '.join(restart)} changed, which takes a restart; "
                        "restart the xApp to apply the file"
                    )
            except (DeploymentError, ServiceError) as error:
                log.error("configuration not reloaded: %s", error)
                return False
            self.file_deployment = deployment
            self._apply(in_force)
            self._reload_tokens(deployment.operator_api.tokens_file)
            return True

    def _apply(self, deployment: Deployment) -> None:
        """Make ``deployment`` the one in force: new CPEs and nodes picked up, removed ones
        forgotten and unsubscribed; what the loop knows of the others stays."""
        before = {c.id for c in self.deployment.cpes}
        after = {c.id for c in deployment.cpes}
        cpes = deployment.domain_cpes()
        self.processor.set_cpes(cpes)
        try:
            self.control.reconfigure(cpes, live_settings(deployment))
        except LiveSetupError as error:
            log.error("configuration not fully applied: %s", error)
        new_settings = e2_settings(deployment)
        if self._termination is not None:
            self._termination.set_settings(new_settings)
        if self._manager is not None:
            for node in new_settings.nodes:
                self.processor.set_node(node, node.kpm_version)
            self._reload_subscriptions(new_settings)
        self.deployment = deployment
        log.info(
            "configuration reloaded: %d CPEs (added %s, removed %s)",
            len(after),
            ", ".join(sorted(after - before)) or "none",
            ", ".join(sorted(before - after)) or "none",
        )

    # ------------------------------------------------------------------ run-time changes
    def put_cpes(self, cpes: Sequence[CpeConfig], who: str, why: str) -> None:
        """Raises DeploymentError (they do not fit the configuration), CpeRefusedError (an
        agent that cannot be set up, an override that would no longer fit, an agent outside
        ``agents.run_time_urls`` or with credentials of its own): nothing stored."""
        for cpe in cpes:
            problem = run_time_agent_problem(cpe, self.file_deployment.agents.run_time_urls)
            if problem is not None:
                raise CpeRefusedError(f"cpe {cpe.id}: {problem}")
        with self._reload_lock:
            in_force = self.cpe_registry.put(
                self.file_deployment, cpes, who, why, check=self._check_cpes
            )
            self._apply(in_force)

    def _check_cpes(self, deployment: Deployment, cpe_ids: Sequence[str]) -> None:
        """CPEs about to come in force: each agent can be set up, each override still fits."""
        chosen = [c for c in deployment.cpes if c.id in set(cpe_ids)]
        default_token = deployment.agents.token_file
        for cpe in chosen:
            if cpe.agent is not None:
                try:
                    agent_endpoint(cpe.agent, default_token, deployment.agents.secrets_folder)
                except ServiceError as error:
                    raise CpeRefusedError(f"cpe {cpe.id}: {error}") from None
        domain = [c for c in deployment.domain_cpes() if c.cpe_id in set(cpe_ids)]
        try:
            self.operator.check_cpes(domain)
        except UnknownError as error:
            raise CpeRefusedError(str(error)) from None

    def remove_cpe(self, cpe_id: str, who: str, why: str) -> None:
        with self._reload_lock:
            in_force = self.cpe_registry.remove(self.file_deployment, cpe_id, who, why)
            self._apply(in_force)

    def reload_model(self, access: str, name: str | None, who: str, why: str) -> dict[str, object]:
        """The model ``name`` from the models folder, or the shipped one (None). Raises
        ValueError when it cannot be loaded, with one message whatever the cause (an operator's
        name must not probe the file system); the cause goes to the log; the old model stays."""
        if name is None:
            model = OnnxCapacityModel.shipped(access)
        else:
            folder = self.deployment.operator_api.models_folder
            refusal = f"no usable {access} model named {name!r} in the models folder"
            if folder is None:
                raise ValueError(f"{refusal} (operator_api.models_folder is not set)")
            try:
                card = find_model_card(folder, name, access)
                model = OnnxCapacityModel(card, within=folder)
            except ModelError as error:
                log.warning("model reload refused: %s", error)
                raise ValueError(f"{refusal}; the xApp's log says why") from None
        estimator = self.control.estimator.model
        before = next(m for m in estimator.describe() if m["access"] == access)
        estimator.swap(access, model)
        after = next(m for m in estimator.describe() if m["access"] == access)
        self.operator.record("model loaded", who, f"{access} model", None, before, after, why)
        log.info("%s model now %s (%s)", access, after["model"], after["card"])
        return after

    def _reload_subscriptions(self, settings: E2Settings) -> None:
        manager = self._manager
        assert manager is not None
        for name in manager.reconfigure(settings):
            self._spawn(f"subscribe-{name}", partial(manager.subscribe, name))

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Stop pushing, delete the subscriptions, close RMR, deregister once, close the store:
        within a few seconds (each part that talks to another service is bounded)."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._ready_gauge.set(0)
        self.control.stop()
        if self.ownership is not None:
            try:
                self.ownership.release()  # the other replicas take over at once
            except Exception as error:
                log.warning("leases not released: %s", error)
        if self._termination is not None:
            self._termination.stop()
        if self._platform is not None:
            self._platform.stop()
        if self._http is not None:
            self._http.should_exit = True
        for part in (self.store, self.audit_log):
            close = getattr(part, "close", None)
            if close is not None:
                close()

    def run_until_signalled(self) -> None:
        """Block until SIGTERM or SIGINT; SIGHUP reloads the configuration."""
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGHUP, lambda *_: self._spawn("reload", self.reload))
        while not stop.wait(0.5):
            pass
        log.info("stopping")
        self.stop()


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def http_listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound for the HTTP server. Its protocol is named (IPPROTO_TCP), not left 0:
    asyncio sets TCP_NODELAY only on connections of sockets that say they are TCP, and without
    it a response written as headers then body waited for the client's delayed ACK: 40 ms on
    every keep-alive request."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def run_time_agent_problem(cpe: CpeConfig, allowed: Sequence[str]) -> str | None:
    """Why a CPE added through the operator API may not have the agent it names, or None.

    An operator token must not turn the xApp into a courier of the agents' token (or of any
    file it can read) to an address of the operator's choosing: such an agent must be where the
    deployment allows (``agents.run_time_urls``) and takes its credentials from the deployment
    (``agents.token_file``, or ``agent.secret`` in ``agents.secrets_folder``), never from a
    path the request names."""
    agent = cpe.agent
    if agent is None:
        return None
    if agent.token_file is not None or agent.ca_file is not None:
        field = "token_file" if agent.token_file is not None else "ca_file"
        return (
            f"agent.{field}: a CPE added through the API takes its agent's credentials from "
            "the deployment (agents.token_file, or agent.secret naming a file in "
            "agents.secrets_folder), not from a path"
        )
    host = urlsplit(agent.url).hostname or ""
    if not any(_host_allowed(host, pattern) for pattern in allowed):
        return (
            f"agent.url: {host} is not where the deployment lets agents of run-time CPEs be "
            f"(agents.run_time_urls: {', '.join(allowed) or 'none'})"
        )
    return None


def _host_allowed(host: str, pattern: str) -> bool:
    if "/" in pattern:  # a network
        try:
            return ipaddress.ip_address(host) in ipaddress.ip_network(pattern, strict=False)
        except ValueError:
            return False
    return fnmatch.fnmatchcase(host.lower(), pattern.lower())
