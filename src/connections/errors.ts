import { forbidden, invalidInput, notFound } from "../core/errors.js";

export const connectionNotFound = () => notFound("Connection not found");
export const noAccess = () => forbidden("You do not have access to this connection");
export const invalid = (field: string, message: string) => invalidInput(field, message);
export const placementDenied = (message: string) => forbidden(message);
