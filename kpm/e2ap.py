"""E2AP messages of the subscription and report path, encoded by pycrate's E2AP module (APER).

Only the procedures this xApp takes part in are wrapped, each as a plain dataclass: E2 setup
(to learn a node's RAN functions and their OIDs), RIC subscription and its deletion, and RIC
indication. pycrate's ASN.1 objects are module-level singletons, hence the lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from pycrate_core.charpy import Charpy

from core.e2_naming import DEFAULT_STYLE, NamingStyle, e2_node_name
from kpm.errors import CodecError

_LOCK = threading.Lock()

# Procedure codes (E2AP §9.4)
PROC_E2_SETUP = 1
PROC_RIC_INDICATION = 5
PROC_RIC_SUBSCRIPTION = 8
PROC_RIC_SUBSCRIPTION_DELETE = 9

# Protocol IE ids (E2AP §9.4)
IE_CAUSE = 1
IE_GLOBAL_E2NODE_ID = 3
IE_GLOBAL_RIC_ID = 4
IE_RAN_FUNCTION_ID = 5
IE_RAN_FUNCTION_ID_ITEM = 6
IE_RAN_FUNCTION_ITEM = 8
IE_RAN_FUNCTIONS_ACCEPTED = 9
IE_RAN_FUNCTIONS_ADDED = 10
IE_ACTION_ADMITTED_ITEM = 14
IE_ACTION_ID = 15
IE_ACTION_NOT_ADMITTED_ITEM = 16
IE_ACTIONS_ADMITTED = 17
IE_ACTIONS_NOT_ADMITTED = 18
IE_ACTION_TO_BE_SETUP_ITEM = 19
IE_INDICATION_HEADER = 25
IE_INDICATION_MESSAGE = 26
IE_INDICATION_SN = 27
IE_INDICATION_TYPE = 28
IE_REQUEST_ID = 29
IE_SUBSCRIPTION_DETAILS = 30
IE_TRANSACTION_ID = 49
IE_COMPONENT_CONFIG_ADDITION = 50
IE_COMPONENT_CONFIG_ADDITION_ITEM = 51
IE_COMPONENT_CONFIG_ADDITION_ACK = 52
IE_COMPONENT_CONFIG_ADDITION_ACK_ITEM = 53

Cause = tuple[str, str]  # (group, value), e.g. ("ricRequest", "action-not-supported")


@dataclass(frozen=True)
class RicRequestId:
    requestor_id: int
    instance_id: int


@dataclass(frozen=True)
class RanFunction:
    function_id: int
    definition: bytes
    revision: int
    oid: str


@dataclass(frozen=True)
class E2SetupRequest:
    transaction_id: int | None  # None: an E2AP v1.01 setup, which has no TransactionID
    plmn: bytes  # 3 bytes, TBCD as in 3GPP
    gnb_id: int
    ran_functions: tuple[RanFunction, ...]
    gnb_id_bits: int = 32  # the gNB ID's length (22..32 bits)
    cu_up_id: int | None = None  # a gNB-CU-UP's E2 connection
    du_id: int | None = None  # a gNB-DU's E2 connection

    @property
    def node_name(self) -> str:
        """The node's name as O-RAN SC's E2 termination builds it (the E2 manager's MEID)."""
        return self.name_in(DEFAULT_STYLE)

    def name_in(self, style: NamingStyle) -> str:
        return e2_node_name(
            self.plmn, self.gnb_id, self.gnb_id_bits, self.cu_up_id, self.du_id, style
        )


@dataclass(frozen=True)
class E2SetupResponse:
    transaction_id: int | None  # None answers an E2AP v1.01 setup in its shape
    accepted: tuple[int, ...]  # RAN function ids


@dataclass(frozen=True)
class ActionToSetup:
    action_id: int
    definition: bytes
    action_type: str = "report"


@dataclass(frozen=True)
class SubscriptionRequest:
    request_id: RicRequestId
    ran_function_id: int
    event_trigger: bytes
    actions: tuple[ActionToSetup, ...]


@dataclass(frozen=True)
class SubscriptionResponse:
    request_id: RicRequestId
    ran_function_id: int
    admitted: tuple[int, ...]
    not_admitted: tuple[tuple[int, Cause], ...] = ()


@dataclass(frozen=True)
class SubscriptionFailure:
    request_id: RicRequestId
    ran_function_id: int
    cause: Cause


@dataclass(frozen=True)
class SubscriptionDeleteRequest:
    request_id: RicRequestId
    ran_function_id: int


@dataclass(frozen=True)
class SubscriptionDeleteResponse:
    request_id: RicRequestId
    ran_function_id: int


@dataclass(frozen=True)
class Indication:
    request_id: RicRequestId
    ran_function_id: int
    action_id: int
    header: bytes
    message: bytes
    sequence_number: int | None = None
    indication_type: str = "report"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


E2apMessage = (
    E2SetupRequest
    | E2SetupResponse
    | SubscriptionRequest
    | SubscriptionResponse
    | SubscriptionFailure
    | SubscriptionDeleteRequest
    | SubscriptionDeleteResponse
    | Indication
)


def _ie(ie_id: int, criticality: str, type_name: str, value: Any) -> dict[str, Any]:
    return {"id": ie_id, "criticality": criticality, "value": (type_name, value)}


def _request_id_ie(request_id: RicRequestId) -> dict[str, Any]:
    value = {"ricRequestorID": request_id.requestor_id, "ricInstanceID": request_id.instance_id}
    return _ie(IE_REQUEST_ID, "reject", "RICrequestID", value)


def _function_id_ie(function_id: int) -> dict[str, Any]:
    return _ie(IE_RAN_FUNCTION_ID, "reject", "RANfunctionID", function_id)


def _pdu_value(message: E2apMessage) -> tuple[str, dict[str, Any]]:
    if isinstance(message, Indication):
        ies = [
            _request_id_ie(message.request_id),
            _function_id_ie(message.ran_function_id),
            _ie(IE_ACTION_ID, "reject", "RICactionID", message.action_id),
        ]
        if message.sequence_number is not None:
            ies.append(_ie(IE_INDICATION_SN, "reject", "RICindicationSN", message.sequence_number))
        ies += [
            _ie(IE_INDICATION_TYPE, "reject", "RICindicationType", message.indication_type),
            _ie(IE_INDICATION_HEADER, "reject", "RICindicationHeader", message.header),
            _ie(IE_INDICATION_MESSAGE, "reject", "RICindicationMessage", message.message),
        ]
        return _initiating(PROC_RIC_INDICATION, "ignore", "RICindication", ies)
    if isinstance(message, SubscriptionRequest):
        actions = [
            _ie(
                IE_ACTION_TO_BE_SETUP_ITEM,
                "ignore",
                "RICaction-ToBeSetup-Item",
                {
                    "ricActionID": action.action_id,
                    "ricActionType": action.action_type,
                    "ricActionDefinition": action.definition,
                },
            )
            for action in message.actions
        ]
        details = {
            "ricEventTriggerDefinition": message.event_trigger,
            "ricAction-ToBeSetup-List": actions,
        }
        ies = [
            _request_id_ie(message.request_id),
            _function_id_ie(message.ran_function_id),
            _ie(IE_SUBSCRIPTION_DETAILS, "reject", "RICsubscriptionDetails", details),
        ]
        return _initiating(PROC_RIC_SUBSCRIPTION, "reject", "RICsubscriptionRequest", ies)
    if isinstance(message, SubscriptionResponse):
        admitted = [
            _ie(IE_ACTION_ADMITTED_ITEM, "ignore", "RICaction-Admitted-Item", {"ricActionID": a})
            for a in message.admitted
        ]
        ies = [
            _request_id_ie(message.request_id),
            _function_id_ie(message.ran_function_id),
            _ie(IE_ACTIONS_ADMITTED, "reject", "RICaction-Admitted-List", admitted),
        ]
        if message.not_admitted:
            refused = [
                _ie(
                    IE_ACTION_NOT_ADMITTED_ITEM,
                    "ignore",
                    "RICaction-NotAdmitted-Item",
                    {"ricActionID": action_id, "cause": cause},
                )
                for action_id, cause in message.not_admitted
            ]
            ies.append(
                _ie(IE_ACTIONS_NOT_ADMITTED, "reject", "RICaction-NotAdmitted-List", refused)
            )
        return (
            "successfulOutcome",
            _procedure(PROC_RIC_SUBSCRIPTION, "reject", "RICsubscriptionResponse", ies),
        )
    if isinstance(message, SubscriptionFailure):
        ies = [
            _request_id_ie(message.request_id),
            _function_id_ie(message.ran_function_id),
            _ie(IE_CAUSE, "reject", "Cause", message.cause),
        ]
        return (
            "unsuccessfulOutcome",
            _procedure(PROC_RIC_SUBSCRIPTION, "reject", "RICsubscriptionFailure", ies),
        )
    if isinstance(message, SubscriptionDeleteRequest):
        ies = [_request_id_ie(message.request_id), _function_id_ie(message.ran_function_id)]
        return _initiating(
            PROC_RIC_SUBSCRIPTION_DELETE, "reject", "RICsubscriptionDeleteRequest", ies
        )
    if isinstance(message, SubscriptionDeleteResponse):
        ies = [_request_id_ie(message.request_id), _function_id_ie(message.ran_function_id)]
        body = _procedure(
            PROC_RIC_SUBSCRIPTION_DELETE, "reject", "RICsubscriptionDeleteResponse", ies
        )
        return ("successfulOutcome", body)
    if isinstance(message, E2SetupRequest):
        return _e2_setup_request(message)
    return _e2_setup_response(message)


def _procedure(code: int, criticality: str, name: str, ies: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "procedureCode": code,
        "criticality": criticality,
        "value": (name, {"protocolIEs": ies}),
    }


def _initiating(
    code: int, criticality: str, name: str, ies: list[dict[str, Any]]
) -> tuple[str, dict[str, Any]]:
    return ("initiatingMessage", _procedure(code, criticality, name, ies))


_COMPONENT_ID = ("e2nodeComponentInterfaceTypeNG", {"amf-name": "atsss"})


def _e2_setup_request(message: E2SetupRequest) -> tuple[str, dict[str, Any]]:
    global_id = {
        "plmn-id": message.plmn,
        "gnb-id": ("gnb-ID", (message.gnb_id, message.gnb_id_bits)),
    }
    node_fields: dict[str, Any] = {"global-gNB-ID": global_id}
    if message.cu_up_id is not None:
        node_fields["gNB-CU-UP-ID"] = message.cu_up_id
    if message.du_id is not None:
        node_fields["gNB-DU-ID"] = message.du_id
    node = ("gNB", node_fields)
    functions = [
        _ie(
            IE_RAN_FUNCTION_ITEM,
            "ignore",
            "RANfunction-Item",
            {
                "ranFunctionID": f.function_id,
                "ranFunctionDefinition": f.definition,
                "ranFunctionRevision": f.revision,
                "ranFunctionOID": f.oid,
            },
        )
        for f in message.ran_functions
    ]
    component = _ie(
        IE_COMPONENT_CONFIG_ADDITION_ITEM,
        "reject",
        "E2nodeComponentConfigAddition-Item",
        {
            "e2nodeComponentInterfaceType": "ng",
            "e2nodeComponentID": _COMPONENT_ID,
            "e2nodeComponentConfiguration": {
                "e2nodeComponentRequestPart": b"",
                "e2nodeComponentResponsePart": b"",
            },
        },
    )
    ies = [
        _ie(IE_GLOBAL_E2NODE_ID, "reject", "GlobalE2node-ID", node),
        _ie(IE_RAN_FUNCTIONS_ADDED, "reject", "RANfunctions-List", functions),
    ]
    component_list = _ie(
        IE_COMPONENT_CONFIG_ADDITION, "reject", "E2nodeComponentConfigAddition-List", [component]
    )
    ies = _in_version_shape(ies, message.transaction_id, component_list)
    return _initiating(PROC_E2_SETUP, "reject", "E2setupRequest", ies)


def _in_version_shape(
    ies: list[dict[str, Any]], transaction_id: int | None, component_ie: dict[str, Any]
) -> list[dict[str, Any]]:
    """E2 setup IEs in E2AP v2+ shape (TransactionID first, the component configuration last),
    or as E2AP v1.01 had them (neither) when there is no transaction id."""
    if transaction_id is None:
        return ies
    first = _ie(IE_TRANSACTION_ID, "reject", "TransactionID", transaction_id)
    return [first, *ies, component_ie]


def _e2_setup_response(message: E2SetupResponse) -> tuple[str, dict[str, Any]]:
    accepted = [
        _ie(
            IE_RAN_FUNCTION_ID_ITEM,
            "ignore",
            "RANfunctionID-Item",
            {"ranFunctionID": function_id, "ranFunctionRevision": 1},
        )
        for function_id in message.accepted
    ]
    ack = _ie(
        IE_COMPONENT_CONFIG_ADDITION_ACK_ITEM,
        "reject",
        "E2nodeComponentConfigAdditionAck-Item",
        {
            "e2nodeComponentInterfaceType": "ng",
            "e2nodeComponentID": _COMPONENT_ID,
            "e2nodeComponentConfigurationAck": {"updateOutcome": "success"},
        },
    )
    ies = [
        _ie(
            IE_GLOBAL_RIC_ID,
            "reject",
            "GlobalRIC-ID",
            {"pLMN-Identity": b"\x00\xf1\x10", "ric-ID": (1, 20)},
        ),
        _ie(IE_RAN_FUNCTIONS_ACCEPTED, "reject", "RANfunctionsID-List", accepted),
    ]
    ack_list = _ie(
        IE_COMPONENT_CONFIG_ADDITION_ACK, "reject", "E2nodeComponentConfigAdditionAck-List", [ack]
    )
    ies = _in_version_shape(ies, message.transaction_id, ack_list)
    return ("successfulOutcome", _procedure(PROC_E2_SETUP, "reject", "E2setupResponse", ies))


def encode(message: E2apMessage) -> bytes:
    from pycrate_asn1dir import E2AP  # imported here: compiling the module takes a moment

    with _LOCK:
        pdu = E2AP.E2AP_PDU_Descriptions.E2AP_PDU
        try:
            pdu.set_val(_pdu_value(message))
            encoded: bytes = pdu.to_aper()
        except Exception as error:  # pycrate reports bad values with its own exception types
            raise CodecError(
                "e2ap-encode", f"cannot encode {type(message).__name__}: {error}"
            ) from error
    return encoded


def decode(data: bytes, *, fast: bool = True) -> E2apMessage:
    """Decode an E2AP PDU into one of the messages above; anything else is a CodecError.

    ``fast``: a RIC indication is read by the strict fast reader first (kpm/fast_e2ap.py,
    some 40 times faster), which hands anything it cannot show canonical to pycrate."""
    from pycrate_asn1dir import E2AP

    from kpm import pycrate_fixes
    from kpm.fast_e2ap import read_indication  # here: it builds on this module's messages

    pycrate_fixes.apply()  # (its fragmented open types, read as X.691 lays them out)

    if fast and (indication := read_indication(data)) is not None:
        return indication
    if not data:
        raise CodecError("empty", "empty E2AP PDU", data)
    with _LOCK:
        pdu = E2AP.E2AP_PDU_Descriptions.E2AP_PDU
        try:
            bits = Charpy(data)
            pdu.from_aper(bits)
            value = pdu.get_val()
        except Exception as error:  # garbage can trip any part of the decoder
            raise CodecError("e2ap-malformed", f"not a valid E2AP PDU: {error}", data) from error
        _check_clean(pdu, bits, data)
    try:
        return _message_from_value(value)
    except CodecError as error:
        raise CodecError(error.cause, str(error), data) from error
    except (KeyError, TypeError, ValueError) as error:
        raise CodecError("e2ap-content", f"E2AP PDU lacks a mandatory IE: {error}", data) from error


def _check_clean(pdu: Any, bits: Any, data: bytes) -> None:
    """Accept a PDU only if the decoder consumed it and it re-encodes to the same bytes: pycrate
    stops at the end of the value and would let trailing bytes, or an IE value its open type
    does not fully hold, pass unnoticed."""
    unread_bits = bits.len_bit()
    if unread_bits:
        raise CodecError(
            "e2ap-malformed",
            f"not a valid E2AP PDU: {unread_bits // 8} of {len(data)} bytes left unread after a "
            "complete PDU",
            data,
        )
    try:
        again = pdu.to_aper()
    except Exception:  # a value the decoder let through but the encoder refuses
        again = None
    if again != data:
        raise CodecError(
            "e2ap-malformed",
            "not a valid E2AP PDU: the bytes decode but do not re-encode to themselves "
            "(non-canonical encoding or skipped content)",
            data,
        )


def _message_from_value(value: tuple[str, dict[str, Any]]) -> E2apMessage:
    kind, body = value
    name, content = body["value"]
    if not isinstance(content, dict):
        raise CodecError(
            "e2ap-unsupported",
            f"E2AP {kind} with procedure code {body.get('procedureCode')} is not an E2AP v1–v3 "
            "procedure (pre-standard encodings, such as O-RAN SC's 2019 drafts, are not read)",
        )
    ies = {ie["id"]: ie["value"][1] for ie in content["protocolIEs"]}
    if name == "RICindication":
        return Indication(
            request_id=_request_id(ies),
            ran_function_id=ies[IE_RAN_FUNCTION_ID],
            action_id=ies[IE_ACTION_ID],
            header=ies[IE_INDICATION_HEADER],
            message=ies[IE_INDICATION_MESSAGE],
            sequence_number=ies.get(IE_INDICATION_SN),
            indication_type=ies[IE_INDICATION_TYPE],
        )
    if name == "RICsubscriptionRequest":
        details = ies[IE_SUBSCRIPTION_DETAILS]
        actions = tuple(
            ActionToSetup(
                action_id=item["ricActionID"],
                definition=item.get("ricActionDefinition", b""),
                action_type=item["ricActionType"],
            )
            for item in (entry["value"][1] for entry in details["ricAction-ToBeSetup-List"])
        )
        return SubscriptionRequest(
            _request_id(ies), ies[IE_RAN_FUNCTION_ID], details["ricEventTriggerDefinition"], actions
        )
    if name == "RICsubscriptionResponse":
        admitted = tuple(e["value"][1]["ricActionID"] for e in ies[IE_ACTIONS_ADMITTED])
        refused = tuple(
            (e["value"][1]["ricActionID"], _cause(e["value"][1]["cause"]))
            for e in ies.get(IE_ACTIONS_NOT_ADMITTED, [])
        )
        return SubscriptionResponse(_request_id(ies), ies[IE_RAN_FUNCTION_ID], admitted, refused)
    if name == "RICsubscriptionFailure":
        return SubscriptionFailure(_request_id(ies), ies[IE_RAN_FUNCTION_ID], _cause(ies[IE_CAUSE]))
    if name == "RICsubscriptionDeleteRequest":
        return SubscriptionDeleteRequest(_request_id(ies), ies[IE_RAN_FUNCTION_ID])
    if name == "RICsubscriptionDeleteResponse":
        return SubscriptionDeleteResponse(_request_id(ies), ies[IE_RAN_FUNCTION_ID])
    if name == "E2setupRequest":
        node_kind, node = ies[IE_GLOBAL_E2NODE_ID]
        if node_kind != "gNB":
            raise CodecError("e2ap-unsupported", f"E2 node type {node_kind} is not supported")
        global_id = node["global-gNB-ID"]
        gnb_value, gnb_bits = global_id["gnb-id"][1]
        functions = tuple(
            RanFunction(
                function_id=item["ranFunctionID"],
                definition=item["ranFunctionDefinition"],
                revision=item["ranFunctionRevision"],
                oid=item.get("ranFunctionOID", ""),
            )
            for item in (entry["value"][1] for entry in ies[IE_RAN_FUNCTIONS_ADDED])
        )
        return E2SetupRequest(
            ies.get(IE_TRANSACTION_ID),
            global_id["plmn-id"],
            gnb_value,
            functions,
            gnb_id_bits=gnb_bits,
            cu_up_id=node.get("gNB-CU-UP-ID"),
            du_id=node.get("gNB-DU-ID"),
        )
    if name == "E2setupResponse":
        accepted = tuple(
            e["value"][1]["ranFunctionID"] for e in ies.get(IE_RAN_FUNCTIONS_ACCEPTED, [])
        )
        return E2SetupResponse(ies.get(IE_TRANSACTION_ID), accepted)
    raise CodecError("e2ap-unsupported", f"E2AP {kind} {name} is not handled by this xApp")


def _request_id(ies: dict[int, Any]) -> RicRequestId:
    raw = ies[IE_REQUEST_ID]
    return RicRequestId(raw["ricRequestorID"], raw["ricInstanceID"])


def _cause(raw: Any) -> Cause:
    group, value = raw
    return (str(group), str(value))
